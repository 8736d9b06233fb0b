class DictTuple(torch.nn.Module):
    def forward(self, x, y = None, alpha : float = 2.0):
        
        # No stacktrace found for following nodes 
        mul = x * alpha;  alpha = None
        cat = torch.cat([x, mul], dim = 0);  mul = None
        to = cat.to(torch.float64)
        clamp = torch.clamp(x, min = -inf, max = inf)
        scale = self.scale
        mul_1 = x * scale;  scale = None
        lin = self.lin(x);  x = None
        _tensor_constant0 = self._tensor_constant0
        return ({'cat': cat, 'zeros': _tensor_constant0, 'tup': (to, clamp), 'lst': [mul_1, lin, None], 'n': 3}, (cat, lin))
        