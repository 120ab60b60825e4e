"""Sampling: policies browse the text environment and answer with quotes (issue 12). Django-free.

- ``types``: what a policy asks a model backend for (``CompletionRequest``) and gets back (``Completion``),
  and the ``Backend`` protocol every backend implements.
- ``endpoint``: an OpenAI-compatible HTTP backend (vLLM, TGI, llama.cpp's server, hosted APIs).
- ``local``: transformers on CPU or CUDA, batched across episodes, with constrained decoding.
- ``constraints``: constrained decoding (quotes verbatim spans of the page; commands in the grammar).
- ``policies``: a BC checkpoint (the bare observation) and a prompted instruct model (chat messages).
- ``episode``: ``run_episode(policy, browser, question, settings)`` and ``run_episodes`` (batched rounds).
- ``best_of_n``: scoring samples with a reward model, choosing the best, declining below a threshold.
"""
