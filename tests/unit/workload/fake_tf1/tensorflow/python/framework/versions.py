import os

__version__ = os.environ.get("FAKE_TF_VERSION", "1.13.1")
