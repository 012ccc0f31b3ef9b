"""Classroom exercises for Chapter 7: checkers, the exercise generator and the instructor's grader.

    checks.py     what a check cell calls: runs the learner's answer on the real engine beside the reference
    generate.py   chapters/solutions/*.ipynb -> chapters/exercises/*.ipynb (answers replaced by stubs)
    grade.py      python -m tinyserve.classroom.grade SUBMISSIONS_DIR  (score table, one line per student)

Notebook tooling (nbformat, nbval) is imported only by the generator and the grader, so `import tinyserve`
stays light.
"""
