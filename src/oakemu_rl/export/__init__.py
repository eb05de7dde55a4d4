"""Export: a trained policy as an ONNX file (`export_policy`), and playing one with
onnxruntime alone (`OnnxPolicy`, `play_onnx`)."""

from .metadata import PolicyFileError, PolicyMetadata
from .onnx_player import OnnxPolicy, play_onnx

__all__ = ["OnnxPolicy", "PolicyFileError", "PolicyMetadata", "play_onnx"]
