"""``python -m app tune`` (an optional part): hyperparameter search and cross-validation on Optuna."""
