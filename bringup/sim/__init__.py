"""Simulations built from real parts: the demo fleet of B300 nodes (demo.py), and the
simulated cluster of network namespaces with real sshd that tests and benchmarks use
(cluster.py, with netns.py for the host plumbing and faults.py for what a node shows).
"""
