"""Picking the most novel of several candidate models (ofuzz.gen.novelty) and the bandit's online root-cause stand-in."""
from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx import TensorProto, helper

from ofuzz.campaign.loop import Campaign, CampaignOptions, rootish
from ofuzz.gen.corpus import load_corpus
from ofuzz.exec.engines.registry import resolve
from ofuzz.gen.fine_coverage import fine_keys
from ofuzz.gen.generate import GenerateOptions, generate_one
from ofuzz.gen.novelty import most_novel, score
from ofuzz.gen.steering import Steering
from tests.helpers import compared_share


def _one(op: str, **attrs: object) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), {"x": np.ones((1, 3, 4, 4), np.float32)}


def test_candidate_zero_is_the_indexs_usual_model_and_others_are_new_valid_models():
    corpus, opts = load_corpus(), GenerateOptions(blocks=(3, 6))
    usual = generate_one(corpus, 7, 11, opts)
    again = generate_one(corpus, 7, 11, opts, candidate=0)
    assert usual.model.SerializeToString() == again.model.SerializeToString()
    others = [generate_one(corpus, 7, 11, opts, candidate=k) for k in (1, 2, 3)]
    assert len({o.model.SerializeToString() for o in others} | {usual.model.SerializeToString()}) == 4
    assert [o.provenance["candidate"] for o in others] == [1, 2, 3] and "candidate" not in usual.provenance
    assert generate_one(corpus, 7, 11, opts, candidate=2).model.SerializeToString() == others[1].model.SerializeToString()
    for o in others:
        onnx.checker.check_model(o.model, full_check=True)


def test_the_score_counts_constructs_new_to_each_engine_weighted_by_its_chance_to_run_them():
    relu, feeds = _one("Relu")
    elu, _ = _one("Elu", alpha=0.5)
    est = Steering()
    seen = fine_keys(relu, feeds, ["a", "b"])
    assert score(relu, feeds, ["a", "b"], seen, est) == 2.0  # nothing new: two runs that compare
    assert score(elu, feeds, ["a", "b"], seen, est) == 2 * (1 + len(fine_keys(elu, feeds, ["a"])))
    assert most_novel([(relu, feeds, ["a", "b"]), (elu, feeds, ["a", "b"])], seen, est) == 1
    assert most_novel([(relu, feeds, ["a"]), (relu, feeds, ["a"])], seen, est) == 0  # a tie keeps the usual model
    for _ in range(6):  # engine b fails to convert every Elu it is sent
        est.observe({"Elu"}, {"a": "DCP", "b": "MCF"}, {"b": "Elu"})
    assert est.run_chance({"Elu"}, "b") < 0.5 and est.run_chance({"Elu"}, "a") == 1.0
    assert score(elu, feeds, ["a", "b"], set(), est) < 1.5 * (1 + len(fine_keys(elu, feeds, ["a"])))
    # with nothing new left, the candidate both engines can run beats one b keeps failing on
    assert most_novel([(elu, feeds, ["a", "b"]), (relu, feeds, ["a", "b"])], seen | fine_keys(elu, feeds, ["a", "b"]), est) == 1
    # a model only b would get, holding what b keeps failing on, loses to a new construct both engines can run
    hard = (elu, feeds, ["b"])
    easy = (_one("Selu", alpha=0.5)[0], feeds, ["a", "b"])
    assert most_novel([hard, easy], set(), est) == 1


def test_rootish_keys_a_failure_by_engine_operator_and_place_not_by_its_wording():
    a = rootish("tensorflow|MCF|exception|ValueError|Concat|Exception encountered when calling layer 'tf.concat_12'",
                {"where": "ops/Concat.py:95:make_node"})
    b = rootish("tensorflow|MCF|exception|ValueError|Concat|Exception encountered when calling layer 'tf.concat_3'",
                {"where": "ops/Concat.py:95:make_node"})
    c = rootish("tensorflow|MCF|exception|ValueError|Concat|Exception encountered when calling layer 'tf.concat_3'",
                {"where": "ops/Concat.py:140:make_node"})
    assert a == b != c
    assert rootish("mnn|DCF|value|Conv", {}) == "mnn|DCF|value|Conv" != rootish("mnn|DCF|nan|Conv", {})
    unnamed = [rootish(f"mnn|IF|crash|SIGSEGV|?|{m}", {}) for m in ("malloc(): corrupted top size", "free(): invalid pointer")]
    assert unnamed[0] != unnamed[1]  # an unplaced, unnamed failure has only its message to tell it apart


def test_picking_among_candidates_raises_the_share_an_engine_compares_without_skipping_it(tmp_path):
    """The test double fails converting four common operators: when the campaign picks the most novel of four
    candidates, weighing each engine's new constructs by its chance to run the model, a larger share of the models the
    double gets reach a comparison than with one candidate, on the same seed, and it is never skipped."""
    faulty = dataclasses.replace(resolve(["testdouble"])[0], name="testdouble",
                                 options={"faults": {op: "prepare:raise" for op in ("Reshape", "Pad", "Slice", "Cast")}})
    specs = [faulty, *resolve(["onnxruntime", "reference"])]
    share = {}
    for k in (1, 4):
        out = tmp_path / f"pick-{k}"
        c = Campaign(load_corpus(), specs, CampaignOptions(engines=[s.name for s in specs], models=120, blocks=(2, 6), seed=5,
                                                           workers=1, timeout=10, chooser="bandit", candidates=k, steer=False), out)
        c.run()
        c.close()
        share[k], skipped = compared_share(out, "testdouble")
        assert skipped == 0
    assert share[4] > share[1] + 0.04, share  # measured: 0.30 -> 0.36
