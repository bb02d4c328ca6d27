"""tooltune: train tool-calling language models with GRPO and verifiable rewards, and evaluate them.

Implements Tool-N1 (binary format+match reward, thinking template), the efficiency methods of
"On Effectiveness and Efficiency of Agentic Tool-calling and RL Training" (pre-rollout filtering,
max-variance down-sampling, evaluation controls) and R2IF (composite reward 3*R_binary + R_cer + R_smv).
See README.md and ../shared/DESIGN.md.
"""

__version__ = "0.1.0"
