"""ortbundle: pruned ONNX Runtime bundles and their packaging, from pinned upstream artifacts."""

__version__ = "0.1.0"
