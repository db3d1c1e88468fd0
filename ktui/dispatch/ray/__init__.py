"""Runs on a Ray cluster: one actor per GPU, each a runner of the run queue.

``pool`` holds the actors and what they share (Ray itself, the limits) and is each actor's body
(``EvalWorker``: a warm local runner on its node); ``runner`` is the queue's side of one actor;
``ship`` reads a job's workspace on the driver and puts it in Ray's store once per version;
``files`` is what an actor writes on its node (the workspace copy, the scratch run folder) and
what comes back into the driver's run folder.
"""
