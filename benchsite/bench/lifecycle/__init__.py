"""The run life cycle, one module per verb: trigger, dispatch (the job spec, sending, held runs'
release), claim, progress, complete, fail, cancel, reap, requeue, imports. judge.py is post-run
judgement's one entry point; tasks.py the web queue's tasks over these verbs; messages.py checks
what GPU workers send."""
