"""BYOG: openCypher graphs of their own per collection; the query screen, lexer and cost guard in front of them."""
