"""The tiny GPT (torch): step (a step's inputs and each layout's K/V: SlabKV, PagedKV), gpt (the modules:
TinyGPT, and its weights: load_model, save_model, CHECKPOINT_DIR, safetensors only), runner (the one place a step
runs: its K/V, segments, sampling); each file imports only the ones before it. Import a name from its module
(`from tinyserve.model.gpt import TinyGPT`): this package re-exports nothing, so importing one module does not
load the others. GPTConfig, the model's shape, is torch-free: tinyserve.core.config. Loading the package sizes
torch's threads (threads.py); the runner holds the thread governor and asks it before each step: the modules
only compute.
"""
from ..threads import fit_torch_threads

fit_torch_threads()  # once per process, before any module here runs a forward: threads that fit the machine
