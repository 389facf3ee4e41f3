"""The PyTorch front end: an nn.Module and example inputs -> a conversion folder (torch-ir.json,
weights.safetensors, reference.safetensors) and the program lowered from it (`driver.FrontEnd`); `door`
plugs it into the one back half and verifier (`door.py`)."""
