package main

import "github.com/spf13/cobra"

func checkCmd() *cobra.Command     { return &cobra.Command{Use: "check"} }
func reshardCmd() *cobra.Command   { return &cobra.Command{Use: "reshard"} }
func toClusterCmd() *cobra.Command { return &cobra.Command{Use: "to-cluster"} }
func statsCmd() *cobra.Command     { return &cobra.Command{Use: "stats"} }
