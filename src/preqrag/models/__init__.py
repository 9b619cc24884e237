"""The models: where a model's files are (``files``: a model name → its weights),
installing the offline LLMs (``install``), checking every configured model before a run
(``preflight``), the onnxruntime plumbing (``onnx_runtime``) and the thread counts models may use
(``threads``), and the backends: LLMs (``llm/``), embedders (``encoders/``) and cross-encoders
(``rerankers/``)."""
