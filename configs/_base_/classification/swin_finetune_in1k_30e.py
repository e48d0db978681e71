# The Swin paper's ImageNet-1K fine-tuning (section 4.1): 30 epochs, batch
# 1024, a constant learning rate of 1e-5, weight decay 1e-8, from a 22K
# pre-trained model (Table 1b) or from the 1K 224 model for 384 inputs
# (Table 1a). The configs set `pretrained` to the checkpoint to start from;
# its `backbone.` weights are loaded (relative position tables resized
# bicubically when the window grows 7 -> 12).
_base_ = './swin_in1k_300e.py'

optim_wrapper = dict(optimizer=dict(lr=1e-5, weight_decay=1e-8))
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=True)]
train_cfg = dict(max_epochs=30)
