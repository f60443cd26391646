"""Generation: corpus → genome → solver → ONNX model, and the coverage and choosers that steer it."""
