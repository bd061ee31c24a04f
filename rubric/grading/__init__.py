"""The instructor autograder behind rubric/grade.py: evidence per rubric criterion, never a verdict.

Modules, in the order a submission meets them (grader.grade runs them all):
    workspace     copy the submission (never touched again); build a pristine lab around its functions
    sandbox       where learner code runs: bubblewrap (default), docker/podman, or none; cgroups
    runner        run learner code in its sandbox: timeout, memory/process ceilings, output to files
    board         the lab's own tests on the learner's code, outcomes per test and milestone
                  (pytest_timer is the small plugin that gives each test a time limit)
    battery       path attacks the guiding tests do not contain, judged in the grader (battery_probe
                  only calls the learner's functions, in the sandbox, and reports what they did;
                  attacks draws the tree, the probes and the parse cases afresh for each run)
    cli_runs      break_and_observe.py and evaluate.py, through their command lines only
    learner_code  AST signals from the learner functions, and the integrity comparisons
    history       every shipped version of a lab file (the grader's copy and its git history)
    documents     UNDERSTANDING.md, FAILURE_ANALYSIS.md and saved runs, against templates and reruns
    prose         the learner's prose checked against their own evidence and code; its specificity
    similarity    normalised functions and prose compared across a class and with the reference
    criteria      the rubric's weights (read from rubric.md) and a suggested level per criterion,
                  with its mark (HOLD, READ), the rule that decided and a confidence
    report        the Markdown report (flags and a ten-line table first) and the accessors renderers share
    classview     the class overview: one offline HTML page, learners by criteria, links to the evidence
    decisions     the grades CSV the instructor edits, and --finalize (final grades and feedback from it)
    feedback      a plain-language feedback file per learner: each failure with how to reproduce it
    gradescope    a result as Gradescope's results.json (rubric/gradescope/ holds the bundle's scripts)
    safe_text     learner text made inert for the terminal, Markdown, HTML and CSV
    synthetic     submissions built from the lab, for rubric/checks/test_grade.py and the benchmark
"""
