"""Classroom exercises for Chapter 7: checkers, the exercise generator, the learner's self-check, the grader.

    checks.py     what a check cell calls: runs the learner's answer on the real engine beside the reference
                  (the work by job: integrity.py, plans.py, harness.py, checks_7_1.py ... checks_7_4.py)
    text.py       every word a learner or an instructor reads from these tools, in one table (to translate)
    generate.py   chapters/solutions/*.ipynb -> chapters/exercises/*.ipynb (what nbgrader's generate_assignment makes)
    check.py      python -m tinyserve.classroom.check NOTEBOOK  (correct / wrong / not attempted, per answer)
    notebooks.py  reading a handed-back file: one reason when it is not a notebook; old files given cell ids
    runner.py     runs a notebook's cells in order, as a kernel would (self-check in process, grader boxed)
    sandbox.py    the box a graded notebook runs in: CPU seconds, memory, process count, files
    grade.py      python -m tinyserve.classroom.grade SUBMISSIONS_DIR  (parallel; LMS table and per-answer table)

Notebook tooling (nbformat, IPython) is imported only by these tools, so `import tinyserve` stays light.
"""
