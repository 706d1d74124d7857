"""One router per endpoint group; each Lambda serves exactly one of them."""
