"""The one run path: which nodes (target.py), what each is asked (plan.py, job.py), how the
request reaches it (local.py, ssh.py with node_code.py), and running them all while
recording and judging each node as it ends (run.py, progress.py). provision.py drives
Ansible over the same inventory (inventory.py).
"""
