"""Deployments: several engine instances serving one stream of requests (Chapter 12's hand-off, run live).

colocated       N replicas, each a whole engine (any policy): a request goes to the least-loaded replica
disaggregated   P prefill instances and D decode instances: a prefill instance computes the prompt and the first
                token (TTFT ends there), the request's K/V cross a link (cost/links.py) to a decode instance, which
                admits it by its own KV capacity and decodes it (DistServe, Splitwise, vLLM's disaggregated prefill)

Each instance is a Run with its own clock; the coordinator (coordinator.py) always steps the instance whose clock is
earliest, so under the modeled clock the instances run in parallel, as separate GPUs do.
"""
from .config import KINDS, DeploymentConfig
from .coordinator import run_deployment, start_deployment
from .record import DeploymentTrace, Transfer

__all__ = ["KINDS", "DeploymentConfig", "run_deployment", "start_deployment", "DeploymentTrace", "Transfer"]
