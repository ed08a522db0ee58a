"""fp16doctor: why is float16 training slower (or faster) than float32 here?"""

__version__ = "0.1.0"
