


def forward(self, x):
    strs = x.strs('hello', "it's", 'say "hi"', 'a\'b"c', 'back\\slash', 'line1\nline2', 'tab\there', '', '\x01\x7f', 'café', ' padded ', msg = 'it\'s "quoted"\n');  x = None
    return strs
    