"""The tiny GPT (torch): gpt (the modules, TinyGPT, and the ragged step they compute: its index tensors, StepInput,
and each layout's K/V, SlabKV and PagedKV), runner (the one place a step runs: its K/V, segments, sampling; the
weights, load_model and save_model, safetensors only; the thread governor); runner imports gpt, never the other
way. Import a name from its module (`from tinyserve.model.gpt import TinyGPT`): this package re-exports nothing,
so importing gpt does not load the runner. GPTConfig, the model's shape, is torch-free: tinyserve.core.config.
Loading the package sizes torch's threads (threads.py); the runner holds the thread governor and asks it before
each step: the modules only compute.
"""
from ..threads import fit_torch_threads

fit_torch_threads()  # once per process, before any module here runs a forward: threads that fit the machine
