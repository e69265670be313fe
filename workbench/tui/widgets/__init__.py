"""One widget per module; the app composes them."""
