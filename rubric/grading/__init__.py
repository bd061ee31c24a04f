"""The instructor autograder behind rubric/grade.py: evidence per rubric criterion, never a verdict.

Modules, in the order a submission meets them:
    workspace   copy the submission (never touched again) and build a pristine lab around its code
    runner      run learner code in a child process: timeout, memory ceiling, no keys, no network
    board       the lab's own tests (pristine) on the learner's code, outcomes per milestone
    battery     path attacks the guiding tests do not contain, against safe_resolve/dispatch_tool
    code        AST signals from the learner functions, and the integrity comparisons
    documents   UNDERSTANDING.md and FAILURE_ANALYSIS.md against their templates and fresh runs
    criteria    the rubric's weights and a suggested level per criterion, with its reasons
    report      Markdown, JSON and CSV
"""
