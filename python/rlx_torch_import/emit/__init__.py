"""Writers of the lowered program: the RLX bundle (crate writers come later)."""
