"""Judging: the comparison rule, the oracle, localisation and isolation of a divergence, noise classes, signatures."""
