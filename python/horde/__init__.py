"""Horde: a load-testing and capacity lab.

The Python package is the control plane: it reads plans, drives the native engine
(``horde._engine``, built from ``crates/horde-py``), stores every run and summarises it.
"""

__version__ = "0.1.0"
