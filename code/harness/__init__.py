"""Test infrastructure for Lesson 06: the milestone runner, scripted models, a strict fake
provider and failure messages. Nothing here is yours to edit; your files are tools.py and
agent_loop.py."""
