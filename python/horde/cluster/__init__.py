"""Scale-out: one run over several generator processes on a Ray cluster (``horde run --cluster``).

- :mod:`horde.cluster.provisioning`: how many generators and where (arithmetic only);
- :mod:`horde.cluster.generator`: one generator, an engine process run as a Ray actor;
- :mod:`horde.cluster.merge`: one second of the run from each generator's snapshot of it;
- :mod:`horde.cluster.coordinator`: starts them together, merges, survives lost ones.

Ray is an optional dependency (``pip install 'horde[cluster]'``): nothing here imports it at
module level, and everything else in Horde works without it.
"""
