"""values: what a problem's inputs and outputs are, before any stage judges them.

Owns loading a problem or candidate file as a module (modules), the tensors' plain facts and transport
(tensors), flattening outputs and noting identities and changes (integrity), the input distributions a check
draws from (distributions) and fresh timed inputs drawn from a secret seed (fresh_inputs). Runs on both sides of
the sandbox: the parent and the child import it.

May import: nothing else in harness (the floor every stage stands on).
"""
