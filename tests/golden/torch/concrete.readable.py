class Concrete(torch.nn.Module):
    def forward(self, x, flag_1, y_1):
        
        # No stacktrace found for following nodes 
        eq = flag_1 == True;  flag_1 = None
        _assert = torch._assert(eq, 'flag has been specialized to have value True but got another value');  eq = None
        _assert_is_none = torch.fx._symbolic_trace._assert_is_none(y_1, 'y has been specialized to have value None but got another value');  y_1 = None
        add = x + 1;  x = None
        return add
        