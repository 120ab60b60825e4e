"""The workforce program: screening tests, qualification states and their gate, gold checks, careless-work
signals, "My quality", time sheets and the team (InstructGPT section 3.4 and B.1; WebGPT Appendix C)."""
