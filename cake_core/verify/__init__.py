"""The verifier: runs registered rules over a kernel. No rule lives here."""
