"""The judges of the two conversation protocols, each conversation judged whole: the flow
(conversation-flow.yaml: `flow_judge`, the LLM judge and the entry the engine calls; `offline_flow`) and a
scenario's expectations (`expectations_judge`; `offline_expectations`), with the truth of a conversation
that has no scenario, read from a judge's triage (`triage_truth`). What they judge and how a verdict is
stored is conversations/'s, which they import downwards."""
