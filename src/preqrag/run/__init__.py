"""What runs pipelines: the pipeline (``pipeline``: the slot sequence, built through the
component registry), the run loop (``runner``: resume, failures), the deadline controller
(``deadline``) and Ray builds and runs (``distributed``)."""
