"""Vertex AI in ml v1 terms: an ml v1 Job as a CustomJob (`translate`) or, with hyperparameters,
as a HyperparameterTuningJob and its study (`study`), and back.

Pure dictionaries in and out: the REST calls are `backends/vertex.py`'s, the serving side is
`emulator/vertex_api.py` and `emulator/tuning_api.py`'s.
"""
