"""The modes of train_e2e.py, one module per feature (train_e2e.py's docstring
describes each mode; train_e2e.py is the command line that runs them):

  common     what the modes share: the stored references' settings, running the
             tools (Tools, run, Fail, Skip), reading references and logs,
             comparing tensors
  grads      --grads, --adamw-step: one step against the stored gradients and
             AdamW step
  train      --train: 20 steps against the PyTorch reference, --threads-sweep
  dp         --dp: ZeRO stages 0-3 over ranks against the 1-rank training
  pp         --pp: pipeline stages (GPipe, 1F1B) against the 1-rank training
  zeropp     --zeropp: ZeRO++ (qwZ, qgZ, hpZ)
  ckpt       --ckpt: ZeRO-3 checkpoints, resume, reshard, zero-ckpt consolidate
  precision  --bf16, --fp16: 16-bit training against the stored PyTorch
             references

Other drivers and train_reference.py import the shared pieces from
training.common (and adam_step1_allowed from training.grads).
"""
