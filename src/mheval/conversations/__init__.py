"""Multi-turn conversations as data: scenarios (read strictly), recorded transcripts and their import, the
simulated user and its guards, each turn's signals, a conversation's truth, and the two conversation
protocols' definitions and stored forms (the flow, the expectations). Their judges live in
judges/conversation/, the stages that play and judge a run's conversations in engine/conversation_stages.py,
and the views of a stored run's conversations in runfolder/conversation_views.py."""
