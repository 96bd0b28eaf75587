"""A distributed TensorFlow 2 trainer that follows the AI Platform Training contract.

Start it with ``python -m trainer.task``; ``trainer.estimator`` holds the Estimator-style
``RunConfig`` / ``TrainSpec`` / ``EvalSpec`` and ``trainer.train_and_evaluate`` runs them on
tf.distribute.
"""
