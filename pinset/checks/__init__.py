"""Pure parsers of what llama.cpp's test programs print (text in, dataclasses out), and the verdicts on them."""
