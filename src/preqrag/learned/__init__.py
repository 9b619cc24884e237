"""Models learned from the user's own questions with gold documents (issue 14; docs/learned.md).

* :mod:`preqrag.learned.ranker` / :mod:`preqrag.learned.train`: ``preqrag train-ranker``, a
  LightGBM LambdaMART final ranking of candidate documents, used by ``[merge] name = "learned"``;
* :mod:`preqrag.learned.encoder`: ``preqrag train-encoder``, fine-tuning the dense encoder;
* :mod:`preqrag.learned.guard`: evaluation refuses questions a model was trained on.
"""
