"""Training offline judges: `train_judge` on a labelled file, and the build of the shipped model files.

Needs scikit-learn (`pip install 'mheval[train]'`); judging with a trained model does not.
"""

from mheval.judges.offline.trained import TrainedJudge, load_trained_judge
from mheval.training.train import TrainResult, fit_judge, train_judge

__all__ = ["TrainResult", "TrainedJudge", "fit_judge", "load_trained_judge", "train_judge"]
