"""What `recollect serve` needs beside the graphs: the server's generated graph config."""
