"""Shared facts every stage may use: paths of the shipped folders, .npz files, guarded onnx calls, spec defaults."""
