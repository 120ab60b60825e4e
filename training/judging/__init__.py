"""Model judges beside human labelers (docs/judges.md): a registered reward model or a language model
behind an endpoint judges a feedback batch's items in both orders, inside the same task shapes as people
(``prompts``, ``verdicts``, ``reward``, ``judges``), as a job on the ``sampling`` queue (``runs``, ``jobs``);
and checks labelers' claim annotations against their quotes (``claims``). Agreement with humans and routing
read the stored judgements (``annotation.judging``)."""
