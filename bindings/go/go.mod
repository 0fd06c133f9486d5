module brisk

go 1.19
