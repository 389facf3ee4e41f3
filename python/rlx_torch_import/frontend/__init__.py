"""torch.export front-end: nn.Module + example inputs -> TorchIR, weights, reference tensors."""
