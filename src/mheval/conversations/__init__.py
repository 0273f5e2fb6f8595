"""Multi-turn conversations: scenarios (as data), the simulated user and its guards, each turn's signals, a
conversation's truth, its judges (the flow and the expectations), its stored views, and the stages that play
and judge it."""
