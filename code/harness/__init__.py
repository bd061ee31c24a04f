"""Test infrastructure for Lesson 06: the milestone runner, scripted models, a strict fake
provider, failure messages, and the machinery of the M6 scripts. Nothing here is yours to edit;
your files are tools.py and agent_loop.py."""
